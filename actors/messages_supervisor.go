package actors

// Messages handled by the backoff supervisor.

// drainTree asks the supervisor to stop the tree gracefully: stop intake, let
// in-flight records finish, commit, close the group, stop the actors. The
// supervisor answers on done (1-buffered) when the tree is gone.
type drainTree struct {
	done chan drainResult
}

// drainResult says how many generations were abandoned because a handler
// never returned: their actors cannot terminate, so whoever stops the
// supervisor must not wait for it.
type drainResult struct {
	abandoned int
	expired   bool // the drain ran out of time: its final commits were not made
}

// treeFailed reports a failure of generation gen that the orchestrator
// detected itself (a handler failure under on_failure: fail).
type treeFailed struct {
	gen int
	err error
	// commit: the tree's bookkeeping is sound (a handler or the dead-letter
	// topic failed, not an actor), so what finished is committed before the
	// restart, through the revocation handshake.
	commit bool
}

// treeDrained reports that generation gen stopped intake and finished.
type treeDrained struct {
	gen int
}

// restartTree is the supervisor's own timer message: start generation gen.
type restartTree struct {
	gen int
}

// abandonWait is the supervisor's own timer message: generation gen did not
// stop within shutdown_timeout (a handler ignores its context).
type abandonWait struct {
	gen int
}

// pingTree asks the tree's control loop to answer (liveness): the
// supervisor forwards it to the orchestrator of the running generation,
// which responds; between generations the supervisor responds itself.
type pingTree struct{}

// treePong answers pingTree.
type treePong struct{}
