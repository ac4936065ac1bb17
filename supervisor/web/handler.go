package web

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// console is the live console: one self-contained page (inline CSS and
// script, no CDN, no build step) that polls /status.
//
//go:embed console.html
var console []byte

// consolePolicy is the page's Content-Security-Policy: it may run its own
// inline script and style (allowed by their hashes, computed here so that
// editing the page cannot forget them) and fetch from its own origin;
// nothing else — no other script, no frame, no form, no image but inline
// SVG and data: URLs.
var consolePolicy = contentPolicy(console)

func contentPolicy(page []byte) string {
	hashes := func(tag string) string {
		re := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`)
		var out []string
		for _, m := range re.FindAllSubmatch(page, -1) {
			sum := sha256.Sum256(m[1])
			out = append(out, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		}
		if len(out) == 0 {
			return "'none'"
		}
		return strings.Join(out, " ")
	}
	return "default-src 'none'; script-src " + hashes("script") + "; style-src " + hashes("style") +
		"; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// Metrics scrapes: at most this many gathered at once (the rest get 503
// at once), each for at most metricsTimeout (then 503), so that a
// collector that hangs holds a bounded number of goroutines.
const (
	maxMetricsInFlight = 4
	metricsTimeout     = 9 * time.Second // under DefaultLimits.Write: the client sees the 503
)

// Handler is the routes of Start: GET /metrics from g (none when g is nil),
// /healthz and /readyz (200 or 503, {"ok":..,"reason":..}), /status (the
// Status as JSON) and / (the console). Other paths are 404; other methods
// on these paths 405.
func Handler(g prometheus.Gatherer, src Source, log zerolog.Logger) http.Handler {
	mux := http.NewServeMux()
	if g != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
			ErrorHandling:       promhttp.ContinueOnError,
			ErrorLog:            promLogger{log},
			MaxRequestsInFlight: maxMetricsInFlight,
			Timeout:             metricsTimeout,
		}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { probe(w, src.Live()) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { probe(w, src.Ready()) })
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, src.Status().normalized(time.Now()))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		// The page changes only with the binary: a minute of caching
		// spares reloads, and an upgrade shows within a minute.
		h.Set("Cache-Control", "max-age=60")
		h.Set("Content-Security-Policy", consolePolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		http.ServeContent(w, r, "console.html", time.Time{}, bytes.NewReader(console))
	})
	return mux
}

// probe answers a liveness or readiness probe: the status code is the
// verdict (what a kubelet reads), the body says why (what a human reads).
func probe(w http.ResponseWriter, c Check) {
	code := http.StatusOK
	if !c.OK {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, c)
}

// writeJSON answers v as JSON, never cached: it is live state.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only for a value json cannot encode (NaN, +Inf): a bug of the source
		http.Error(w, "web: encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// promLogger routes promhttp's errors (a collector failing, a client gone)
// to zerolog.
type promLogger struct{ log zerolog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Warn().Str("error", strings.TrimSpace(fmt.Sprintln(v...))).Msg("serving /metrics")
}
