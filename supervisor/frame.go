package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/turbokafka/turbo/proto/swarmpb"
	"google.golang.org/protobuf/encoding/protodelim"
)

// maxFrame bounds one frame. A report without metrics is under 200 bytes;
// with http.listen set it carries the node's Prometheus families and its
// /status document. Sized for a node holding 4,096 partitions: about 10
// series per partition at about 150 bytes each in the delimited protobuf
// format is 6 MiB (a node caps its metrics there), its status JSON about
// 250 bytes per partition, 1 MiB (capped there too), and the rest of the
// report and the Go runtime's and process's families fit in what is left.
// The reader allocates what a frame announces before reading it, so this
// is also what one node can make the supervisor allocate at once: only
// nodes get this far (peer credentials are checked at accept).
const maxFrame = 8 << 20

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
