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

func TestMalformedFramesAreRejected(t *testing.T) {
	hello := encodeFrame(sampleFrames()[0])
	for name, in := range map[string][]byte{
		"truncated body":   hello[:len(hello)-2],
		"huge length":      {0xff, 0xff, 0xff, 0x7f},
		"not protobuf":     {0x04, 0xff, 0xff, 0xff, 0xff},
		"empty frame":      {0x00},
		"bad varint":       {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"wrong field type": {0x02, 0x0d, 0x00},
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
