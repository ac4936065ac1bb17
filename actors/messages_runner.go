package actors

import "github.com/turbokafka/turbo/actors/pipeline"

// runRecords (coordinator → runner): records to run one after the other. The
// coordinator batches only when handlers are fast enough that a batch costs
// less than the actor hops it saves.
type runRecords struct {
	batch *runBatch
}

// runBatch is shared by the runner that runs it and the coordinator's
// pipeline, which may take back the records the runner has not started and
// account for those it finished before the batch ends (see pipeline.Batch).
type runBatch = pipeline.Batch[*envelope]
