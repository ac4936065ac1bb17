package supervisor

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/turbokafka/turbo/supervisor/web"
)

// routeWait bounds a node's answer to a command: under the HTTP server's
// write timeout, so that the client gets the answer, or the reason there
// is none.
const routeWait = 8 * time.Second

// nodeRouter is the swarm supervisor's web.Controller: it sends each
// command to every node connected to the health socket, at once, and
// combines their answers.
type nodeRouter struct{ h *healthServer }

// Do implements web.Controller.
func (r nodeRouter) Do(cmd web.Command) (string, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return "", err
	}
	var (
		mu      sync.Mutex
		answers []nodeAnswer
		wg      sync.WaitGroup
	)
	for pid, index := range r.h.connected() {
		wg.Go(func() {
			a := nodeAnswer{index: index}
			res, err := r.h.command(pid, b, routeWait)
			if err != nil {
				a.err = err
			} else {
				a.outcome, a.result = res.GetOutcome(), res.GetResult()
			}
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		})
	}
	wg.Wait()
	return combine(cmd, answers)
}
