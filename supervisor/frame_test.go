package supervisor

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/turbokafka/turbo/proto/swarmpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// encodeFrame returns the bytes writeFrame writes for f.
func encodeFrame(f *swarmpb.Frame) []byte {
	b, err := proto.Marshal(f)
	if err != nil {
		panic(err) // a Frame built in code always marshals
	}
	return append(protowire.AppendVarint(nil, uint64(len(b))), b...)
}

func sampleFrames() []*swarmpb.Frame {
	return []*swarmpb.Frame{
		{Body: &swarmpb.Frame_Hello{Hello: &swarmpb.Hello{Index: 3, Pid: 4242, Version: "0.1.0"}}},
		{Body: &swarmpb.Frame_Report{Report: &swarmpb.Report{Status: swarmpb.Status_STATUS_POLL_STALLED, Detail: "x", RssBytes: 1 << 30, Lag: -1, Processed: 9}}},
		{Body: &swarmpb.Frame_Report{Report: &swarmpb.Report{}}},
		{Body: &swarmpb.Frame_Report{Report: &swarmpb.Report{Ready: true, ReadyDetail: "r", Metrics: []byte{0x02, 0x0a, 0x00}, StatusJson: []byte(`{"mode":"run"}`)}}},
		{Body: &swarmpb.Frame_Start{Start: &swarmpb.Start{}}},
	}
}

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, f := range sampleFrames() {
		if err := writeFrame(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	fr := newFrameReader(&buf)
	for i, want := range sampleFrames() {
		got, err := fr.next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("frame %d = %v, want %v", i, got, want)
		}
	}
	if _, err := fr.next(); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
}

// A report as large as maxFrame allows (a node's metrics and status at the
// bound) is read; one byte more is refused before anything is allocated.
func TestFrameAtTheBound(t *testing.T) {
	f := &swarmpb.Frame{Body: &swarmpb.Frame_Report{Report: &swarmpb.Report{Metrics: []byte{}}}}
	overhead := len(encodeFrame(f))
	// The metrics field's own length prefix grows with its size: try
	// sizes down from the bound until the frame's body is exactly maxFrame.
	for n := maxFrame - overhead; n > 0; n-- {
		f.GetReport().Metrics = bytes.Repeat([]byte{'m'}, n)
		b, _ := proto.Marshal(f)
		if len(b) == maxFrame {
			break
		}
	}
	if b, _ := proto.Marshal(f); len(b) != maxFrame {
		t.Fatalf("could not build a frame of exactly %d bytes (got %d)", maxFrame, len(b))
	}
	got, err := newFrameReader(bytes.NewReader(encodeFrame(f))).next()
	if err != nil || !proto.Equal(got, f) {
		t.Fatalf("a frame of exactly maxFrame (%d bytes): %v", maxFrame, err)
	}
	f.GetReport().Metrics = append(f.GetReport().Metrics, 'm')
	if _, err := newFrameReader(bytes.NewReader(encodeFrame(f))).next(); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("a frame one byte over maxFrame: %v, want ErrBadFrame", err)
	}
}

func TestMalformedFramesAreRejected(t *testing.T) {
	hello := encodeFrame(sampleFrames()[0])
	for name, in := range map[string][]byte{
		"truncated body":    hello[:len(hello)-2],
		"huge length":       {0xff, 0xff, 0xff, 0x7f},
		"one over maxFrame": protowire.AppendVarint(nil, maxFrame+1),
		"not protobuf":      {0x04, 0xff, 0xff, 0xff, 0xff},
		"empty frame":       {0x00},
		"bad varint":        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"wrong field type":  {0x02, 0x0d, 0x00},
	} {
		_, err := newFrameReader(bytes.NewReader(in)).next()
		if !errors.Is(err, ErrBadFrame) {
			t.Errorf("%s: %v, want ErrBadFrame", name, err)
		}
	}
}

// FuzzFrameReader: any byte stream yields frames, io.EOF or ErrBadFrame —
// never a panic, never another error — and every frame read re-encodes to
// a frame that reads back equal.
func FuzzFrameReader(f *testing.F) {
	for _, fr := range sampleFrames() {
		f.Add(encodeFrame(fr))
	}
	f.Add([]byte{0x00})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data))
		for range 64 {
			got, err := fr.next()
			if err == io.EOF || errors.Is(err, ErrBadFrame) {
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			again, err := newFrameReader(bytes.NewReader(encodeFrame(got))).next()
			if err != nil || !proto.Equal(again, got) {
				t.Fatalf("re-encoded frame reads back as %v, %v; want %v", again, err, got)
			}
		}
	})
}
