package actors

// What a Kafka client fetches of one partition per request. A partition
// whose credits run out is paused, but what the client already fetched of
// it stays in memory until the partition is read again: at most one fetch
// of every partition owned. At 4,096 partitions a fixed 256 KiB each is a
// gigabyte however small turbo's own budget, so the fetch shrinks with the
// partitions to the byte budget's share of each, down to minPartitionFetch.
// A record batch larger than the fetch is still returned whole (KIP-74), so
// a small fetch never stalls a partition; it only costs round trips.
const (
	maxPartitionFetch = 256 << 10
	minPartitionFetch = 16 << 10
)

// partitionFetch is the bytes to fetch of each partition when the
// subscription has partitions partitions (0: not known, the largest) and
// the consumer's byte budget is budgetBytes (max_buffered_bytes). Sized from
// the whole subscription, as a member may come to own all of it.
func partitionFetch(partitions int, budgetBytes int64) int32 {
	if partitions <= 0 {
		return maxPartitionFetch
	}
	return int32(min(maxPartitionFetch, max(minPartitionFetch, budgetBytes/int64(partitions))))
}
