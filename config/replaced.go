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

// EnvNodePrefix begins the names of the variables turbo swarm gives its
// nodes (the health socket, the node's index, the swarm's size: see package
// supervisor). No top-level key's first word is "node", so they lie outside
// the configuration's namespace (envNamespace): Load neither reads nor
// refuses them, and a program passes them to Load with the rest of its
// environment.
const EnvNodePrefix = EnvPrefix + "_NODE_"

// movedNodeEnv maps the names the node variables had inside the swarm
// section's namespace (TURBO_SWARM_) to their names now. A variable still
// set under an old name is refused with its new one, rather than as a
// misspelt key.
var movedNodeEnv = map[string]string{
	"TURBO_SWARM_SOCKET":       EnvNodePrefix + "SOCKET",
	"TURBO_SWARM_NODE_INDEX":   EnvNodePrefix + "INDEX",
	"TURBO_SWARM_NODE_COUNT":   EnvNodePrefix + "COUNT",
	"TURBO_SWARM_EXIT_ON_IDLE": EnvNodePrefix + "EXIT_ON_IDLE",
	"TURBO_SWARM_OBSERVE":      EnvNodePrefix + "OBSERVE",
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
