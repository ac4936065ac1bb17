package actors

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A key lands where Kafka's producers put it: franz-go's default
// partitioner (Kafka's murmur2, as the Java producer) agrees for every key
// length and partition count, and a known value of Kafka's own murmur2
// holds.
func TestKafkaPartitionerMatchesKafkas(t *testing.T) {
	franz := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	p := newKafkaPartitioner("t")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		key := make([]byte, i%37)
		for j := range key {
			key[j] = byte(rng.UintN(256))
		}
		for _, n := range []int32{1, 2, 3, 7, 8, 64, 100, 4096} {
			got, err := p.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(key)}, n)
			if err != nil {
				t.Fatal(err)
			}
			if want := int32(franz.Partition(&kgo.Record{Key: key}, int(n))); got != want {
				t.Fatalf("key %x over %d partitions: partition %d, franz-go (Kafka's murmur2) %d", key, n, got, want)
			}
		}
	}
	// Kafka's own values (UtilsTest.testMurmur2).
	for in, want := range map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107,
	} {
		if got := int32(murmur2([]byte(in))); got != want {
			t.Errorf("murmur2(%q) = %d, want Kafka's %d", in, got, want)
		}
	}
}

// Keyless records take the partitions in turn.
func TestKafkaPartitionerSpreadsKeyless(t *testing.T) {
	p := newKafkaPartitioner("t")
	seen := map[int32]int{}
	for range 30 {
		got, _ := p.Partition(&sarama.ProducerMessage{Value: sarama.StringEncoder("v")}, 3)
		seen[got]++
	}
	if fmt.Sprint(seen) != "map[0:10 1:10 2:10]" {
		t.Errorf("30 keyless records over 3 partitions: %v, want 10 each", seen)
	}
}
