package memkafka

import (
	"errors"
	"slices"
	"testing"
)

var (
	p0 = TopicPartition{Topic: "orders", Partition: 0}
	p1 = TopicPartition{Topic: "orders", Partition: 1}
	x0 = TopicPartition{Topic: "other", Partition: 0}
)

func rec(tp TopicPartition, offset int64) Record {
	return Record{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Value: []byte("v")}
}

func TestProduceKeepsOffsetsIncreasing(t *testing.T) {
	c := New()
	if err := c.Produce(rec(p0, 0), rec(p0, 5), rec(p1, 0)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Record{rec(p0, 5), rec(p0, 3), rec(p0, -1)} {
		if err := c.Produce(bad); !errors.Is(err, ErrOffsetOrder) {
			t.Errorf("Produce(%s@%d) = %v, want ErrOffsetOrder", bad.TP(), bad.Offset, err)
		}
	}
	if s := c.Partition(p0); s.End != 6 || s.Records != 2 {
		t.Errorf("partition 0: %+v, want 2 records ending at 6", s)
	}
}

func TestFetchReadsFromAnOffsetAcrossGaps(t *testing.T) {
	c := New()
	_ = c.Produce(rec(p0, 0), rec(p0, 1), rec(p0, 5), rec(p0, 6), rec(p0, 10))
	m := c.Join([]string{"orders"})
	offsets := func(rs []Record) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.Offset)
		}
		return out
	}
	for _, tc := range []struct {
		from int64
		max  int
		want []int64
	}{
		{0, 10, []int64{0, 1, 5, 6, 10}},
		{2, 2, []int64{5, 6}}, // 2 was never written: the next one comes
		{10, 5, []int64{10}},
		{11, 5, nil},
	} {
		got, end := m.Fetch(p0, tc.from, tc.max)
		if !slices.Equal(offsets(got), tc.want) || end != 11 {
			t.Errorf("Fetch(from %d, max %d) = %v, end %d; want %v, end 11", tc.from, tc.max, offsets(got), end, tc.want)
		}
	}
}

func TestOnePartitionOneHolderAndFencedCommits(t *testing.T) {
	c := New()
	c.Assign(p0, p1, x0)
	a, b := c.Join([]string{"orders"}), c.Join([]string{"orders"})
	if got := a.Acquire(); !slices.Equal(got, []TopicPartition{p0, p1}) {
		t.Fatalf("a acquired %v, want its topic's two partitions", got)
	}
	if got := b.Acquire(); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds them", got)
	}
	if !a.Commit(p0, 3, "m") || b.Commit(p0, 4, "") {
		t.Fatal("only the holder may commit")
	}
	a.Release(p0)
	if a.Commit(p0, 5, "") {
		t.Fatal("a committed a partition it released")
	}
	if got := b.Acquire(); !slices.Equal(got, []TopicPartition{p0}) {
		t.Fatalf("b acquired %v after the release, want p0", got)
	}
	if off, meta := b.Committed(p0); off != 3 || meta != "m" {
		t.Fatalf("b reads %d %q, want a's commit 3 \"m\"", off, meta)
	}
	if s := c.Partition(p0); s.Claims != 2 || s.Commits != 1 || !s.Owned {
		t.Fatalf("partition 0: %+v, want taken twice, committed once, held", s)
	}
	c.Revoke(p1)
	if a.Assigned(p1) {
		t.Fatal("p1 still assigned after Revoke")
	}
	a.Leave()
	if c.Partition(p1).Owned {
		t.Fatal("a still holds p1 after leaving")
	}
}

func TestChangedAnnouncesEveryChange(t *testing.T) {
	c := New()
	m := c.Join([]string{"orders"})
	for _, step := range []struct {
		name   string
		change func()
	}{
		{"produce", func() { _ = c.Produce(rec(p0, 0)) }},
		{"assign", func() { c.Assign(p0) }},
		{"acquire", func() { m.Acquire() }},
		{"commit", func() { m.Commit(p0, 1, "") }},
		{"dead letter", func() { _ = m.DeadLetter(rec(p0, 0)) }},
		{"release", func() { m.Release(p0) }},
		{"revoke", func() { c.Revoke(p0) }},
	} {
		ch := c.Changed()
		step.change()
		select {
		case <-ch:
		default:
			t.Errorf("%s did not close Changed()", step.name)
		}
	}
	boom := errors.New("boom")
	c.FailDeadLetters(boom)
	if err := m.DeadLetter(rec(p0, 0)); !errors.Is(err, boom) {
		t.Errorf("DeadLetter = %v, want the injected error", err)
	}
	if n := len(c.DeadLetters()); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
}

func TestLoseTakesAPartitionWithoutAHandover(t *testing.T) {
	c := New()
	c.Assign(p0)
	m := c.Join([]string{"orders"})
	if got := m.Acquire(); !slices.Equal(got, []TopicPartition{p0}) {
		t.Fatalf("Acquire = %v", got)
	}
	c.Lose(p0)
	if !m.Lost(p0) || c.Partition(p0).Owned {
		t.Fatalf("after Lose: lost %v, held %v; want lost and not held", m.Lost(p0), c.Partition(p0).Owned)
	}
	if m.Commit(p0, 3, "") {
		t.Error("a commit of a lost partition was applied")
	}
	if got := m.Acquire(); len(got) != 0 {
		t.Errorf("the member took back %v before releasing its lost claim", got)
	}
	m.Release(p0)
	if m.Lost(p0) {
		t.Error("still lost after the release")
	}
	if got := m.Acquire(); !slices.Equal(got, []TopicPartition{p0}) || c.Partition(p0).Claims != 2 {
		t.Errorf("Acquire after the release = %v (claims %d), want p0 as a new assignment", got, c.Partition(p0).Claims)
	}
}
