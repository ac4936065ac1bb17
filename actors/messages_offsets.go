package actors

import "github.com/turbokafka/turbo/actors/offsetmeta"

// Messages handled by the offset controller.

// trackPartition starts a fresh watermark for a new assignment, which an
// earlier owner left with finished ranges above the committed offset
// (read-only).
type trackPartition struct {
	tp       TopicPartition
	epoch    uint64
	finished []offsetmeta.Range
}

// trackRecords registers records handed out for processing (one partition,
// offset order).
type trackRecords struct {
	records []*envelope
}

// markDone marks records finished.
type markDone struct {
	records []*envelope
}

// finalizePartition asks for the partition's last watermark and forgets it.
type finalizePartition struct {
	tp    TopicPartition
	epoch uint64
}
