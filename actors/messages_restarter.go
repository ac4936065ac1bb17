package actors

// Messages handled by the restarter (the backoff supervisor at the root of
// a consumer's tree).

// drainTree asks the restarter to stop the tree gracefully: stop intake, let
// in-flight records finish, commit, close the group, stop the actors. The
// restarter answers on done (1-buffered) when the tree is gone.
type drainTree struct {
	done chan drainResult
}

// drainResult says how many generations were abandoned because a handler
// never returned: their actors cannot terminate, so whoever stops the
// restarter must not wait for it.
type drainResult struct {
	abandoned int
	expired   bool // the drain ran out of time: its final commits were not made
}

// treeFailed reports that generation gen failed. It has three senders: the
// orchestrator (a record failed for good under on_failure: fail, or the
// dead-letter topic failed: commit is set), the restarter's HandleFailure
// (an actor panicked, escalated through protoactor: a FailureError), and
// the restarter's own timers (a failed generation's commit, or a drain,
// ran out of time: errResignTimeout, errDrainTimeout).
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

// restartTree is the restarter's own timer message: start generation gen.
type restartTree struct {
	gen int
}

// abandonWait is the restarter's own timer message: generation gen did not
// stop within shutdown_timeout (a handler ignores its context).
type abandonWait struct {
	gen int
}

// pingTree asks the tree's control loop to answer (liveness): the
// restarter forwards it to the orchestrator of the running generation,
// which responds; between generations the restarter responds itself.
type pingTree struct{}

// treePong answers pingTree.
type treePong struct{}
