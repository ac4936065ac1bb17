package actors

import (
	"sync/atomic"

	"github.com/IBM/sarama"
)

// kafkaPartitioner picks the partition of a record the sarama side writes
// (outputs, dead letters) as Kafka's own producers do: a keyed record by
// the murmur2 hash of its key, positive, modulo the partition count — the
// partition Java's producer and franz-go pick for the same key, so a key's
// records written by turbo and by other producers meet in one partition.
// Keyless records take the partitions in turn. sarama's own hash
// partitioners use other hashes (FNV-1a) or fold the sign differently.
type kafkaPartitioner struct {
	next atomic.Uint32 // the keyless records' turn
}

func newKafkaPartitioner(string) sarama.Partitioner { return &kafkaPartitioner{} }

// Partition implements sarama.Partitioner.
func (p *kafkaPartitioner) Partition(m *sarama.ProducerMessage, partitions int32) (int32, error) {
	if m.Key == nil {
		return int32((p.next.Add(1) - 1) % uint32(partitions)), nil
	}
	key, err := m.Key.Encode()
	if err != nil {
		return -1, err
	}
	return keyPartition(key, partitions), nil
}

// RequiresConsistency implements sarama.Partitioner: a key's partition must
// not change while a partition is unavailable.
func (p *kafkaPartitioner) RequiresConsistency() bool { return true }

// keyPartition is Kafka's partition for a key: toPositive(murmur2(key)) %
// partitions (Utils.toPositive masks the sign bit).
func keyPartition(key []byte, partitions int32) int32 {
	return int32((murmur2(key) & 0x7fffffff) % uint32(partitions))
}

// murmur2 is Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c), in
// unsigned arithmetic with the same bits.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
