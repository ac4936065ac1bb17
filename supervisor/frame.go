package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/turbokafka/turbo/proto/swarmpb"
	"google.golang.org/protobuf/encoding/protodelim"
)

// maxFrame bounds one frame: a report is under 200 bytes, so anything near
// this is garbage, and a peer cannot make the supervisor allocate much.
const maxFrame = 16 << 10

// ErrBadFrame is the error of a frame that is not a well-formed Frame.
var ErrBadFrame = errors.New("supervisor: malformed health frame")

// frameReader reads length-delimited Frames from a stream.
type frameReader struct{ r *bufio.Reader }

func newFrameReader(r io.Reader) *frameReader { return &frameReader{r: bufio.NewReaderSize(r, 512)} }

// next returns the next frame; io.EOF at a clean end of stream, ErrBadFrame
// (wrapped) for bytes that are not a frame or a frame with no body.
func (fr *frameReader) next() (*swarmpb.Frame, error) {
	f := &swarmpb.Frame{}
	err := protodelim.UnmarshalOptions{MaxSize: maxFrame}.UnmarshalFrom(fr.r, f)
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%w: truncated", ErrBadFrame)
	case err != nil:
		var size *protodelim.SizeTooLargeError
		if errors.As(err, &size) {
			return nil, fmt.Errorf("%w: %d bytes announced, at most %d allowed", ErrBadFrame, size.Size, maxFrame)
		}
		if isNetErr(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrBadFrame, err)
	case f.Body == nil:
		return nil, fmt.Errorf("%w: no body", ErrBadFrame)
	}
	return f, nil
}

// isNetErr tells a read error of the connection from a decoding error.
func isNetErr(err error) bool {
	var op interface{ Timeout() bool }
	return errors.As(err, &op)
}

// writeFrame writes one length-delimited frame.
func writeFrame(w io.Writer, f *swarmpb.Frame) error {
	_, err := protodelim.MarshalTo(w, f)
	return err
}
