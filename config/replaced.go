package config

import "strings"

// replacedKeys are keys turbo no longer reads, by path, with what to do
// instead. A file (or environment variable) that still sets one is refused
// with this message rather than "unknown key", and rather than silently
// ignored: an operator who kept the old key would otherwise lose the
// endpoint their probes use without a word.
var replacedKeys = map[string]string{
	"swarm.liveness_listen": "replaced by http.listen (the same /healthz and /status, plus /metrics, /readyz and the console); move the address there",
}

// replacedEnv reports whether the environment variable name would have set
// a replaced key, and which, with the key's message.
func replacedEnv(name string) (key, msg string, ok bool) {
	for key, msg := range replacedKeys {
		if name == EnvPrefix+"_"+strings.ToUpper(strings.ReplaceAll(key, ".", "_")) {
			return key, msg, true
		}
	}
	return "", "", false
}
