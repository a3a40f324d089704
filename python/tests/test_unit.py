"""Unit tests of the pure-Python parts of multirail (no library, no ranks):
op and dtype mapping, buffers, errors, library lookup, the fork guard, the
torch backend's registration and tensor handling.

    .venv/bin/python -m unittest python/tests/test_unit.py
"""

import array
import os
import sys
import unittest

try:  # the installed package (scripts/build-python.sh), else the source tree's
    import multirail  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import multirail  # noqa: E402
from multirail import _lib, errors  # noqa: E402

try:
    import torch
    import torch.distributed as dist
except ImportError:  # the torch tests below fail (not skip) under CI=true
    torch = None


class TestErrors(unittest.TestCase):
    def test_codes(self):
        for code, cls in [
            (-1, multirail.InvalidError),
            (-2, multirail.ConfigError),
            (-3, multirail.BootstrapError),
            (-4, multirail.PeerError),
            (-5, multirail.ClosedError),
            (-6, multirail.AbortedError),
            (-7, multirail.TimeoutError),
            (-8, multirail.TruncatedError),
            (-9, multirail.ForkError),
            (-10, multirail.PanicError),
            (-11, multirail.InternalError),
        ]:
            e = errors.error_for(code, "multirail: x")
            self.assertIsInstance(e, cls)
            self.assertIsInstance(e, multirail.Error)
            self.assertIsInstance(e, RuntimeError)
            self.assertEqual(e.code, code)
            self.assertEqual(str(e), "multirail: x")
        self.assertIsInstance(errors.error_for(-7, "t"), TimeoutError)  # the builtin too
        self.assertIsInstance(errors.error_for(-1, "v"), ValueError)
        self.assertEqual(type(errors.error_for(-99, "?")), multirail.Error)

    def test_check(self):
        err = _lib.mr_error()
        err.code = -4
        err.msg = b"multirail: allreduce: rank 2 failed"
        with self.assertRaises(multirail.PeerError) as cm:
            _lib.check(-4, err, "allreduce")
        self.assertEqual(str(cm.exception), "multirail: allreduce: rank 2 failed")
        self.assertEqual(_lib.check(0, err), 0)
        self.assertEqual(_lib.check(5, err), 5)


class TestMapping(unittest.TestCase):
    def test_ops(self):
        self.assertEqual(multirail.op_code("sum"), 0)
        self.assertEqual(multirail.op_code("PRODUCT"), 1)
        self.assertEqual(multirail.op_code("avg"), 4)
        self.assertEqual(multirail.op_code("bxor"), 7)
        self.assertEqual(multirail.op_code(3), 3)
        with self.assertRaises(multirail.InvalidError):
            multirail.op_code("median")
        with self.assertRaises(multirail.InvalidError):
            multirail.op_code(8)

    def test_dtypes(self):
        self.assertEqual([multirail.dtype_code(n) for n in _lib.DTYPE_NAMES], list(range(9)))
        with self.assertRaises(multirail.InvalidError):
            multirail.dtype_code("complex64")

    def test_bufs(self):
        cases = [("B", 0), ("b", 1), ("i", 3), ("q", 4), ("f", 7), ("d", 8)]
        for fmt, want in cases:
            b = multirail._Buf(array.array(fmt, [1, 2, 3]))
            self.assertEqual((b.dtype, b.count), (want, 3), fmt)
        b = multirail._Buf(memoryview(bytearray(6)), dtype="bfloat16")
        self.assertEqual((b.dtype, b.count, b.nbytes), (6, 3, 6))
        b = multirail._Buf(b"abcd", writable=False)
        self.assertEqual((b.dtype, b.count), (0, 4))
        self.assertNotEqual(b.addr, None)
        with self.assertRaises(multirail.InvalidError):
            multirail._Buf(b"abcd", writable=True)  # read-only output
        with self.assertRaises(multirail.InvalidError):
            multirail._Buf(bytearray(3), dtype="int32")  # not whole elements
        with self.assertRaises(multirail.InvalidError):
            multirail._Buf(memoryview(bytearray(8))[::2])  # not contiguous
        with self.assertRaises(multirail.InvalidError):
            multirail._Buf(array.array("I", [1]))  # unsigned 32-bit: no dtype

    def test_config_json(self):
        self.assertIsNone(multirail.config_json(None))
        self.assertEqual(multirail.config_json({"emu": "emu:1mbit"}), b'{"emu": "emu:1mbit"}')
        self.assertEqual(multirail.lossy_opts(True, 256), b'{"error_feedback": true, "packet_floats": 256}')
        self.assertIsNone(multirail.lossy_opts())


class TestLibrary(unittest.TestCase):
    def test_candidates(self):
        old = os.environ.get("MULTIRAIL_LIB")
        try:
            os.environ["MULTIRAIL_LIB"] = "/nonexistent/libmultirail.so"
            c = _lib.candidates()
            self.assertEqual(c[0], "/nonexistent/libmultirail.so")
            self.assertTrue(c[1].endswith(os.path.join("multirail", "libmultirail.so")))
            self.assertTrue(c[2].endswith(os.path.join("build", "libmultirail.so")))
        finally:
            if old is None:
                os.environ.pop("MULTIRAIL_LIB", None)
            else:
                os.environ["MULTIRAIL_LIB"] = old

    def test_not_found_message(self):
        saved = _lib._lib, _lib.candidates
        try:
            _lib._lib = None
            _lib.candidates = lambda: ["/nonexistent/a.so"]
            with self.assertRaises(multirail.ConfigError) as cm:
                _lib.lib()
            self.assertIn("build-capi.sh", str(cm.exception))
            self.assertIn("/nonexistent/a.so", str(cm.exception))
        finally:
            _lib._lib, _lib.candidates = saved

    def test_fork_guard(self):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: every call must refuse at once
            os.close(r)
            try:
                _lib.lib()
                os.write(w, b"no error")
            except multirail.ForkError as e:
                os.write(w, ("ok " + str(e)).encode())
            except BaseException as e:  # noqa: BLE001
                os.write(w, ("wrong " + repr(e)).encode())
            os._exit(0)
        os.close(w)
        got = os.read(r, 4096).decode()
        os.close(r)
        os.waitpid(pid, 0)
        self.assertTrue(got.startswith("ok "), got)
        self.assertIn("fork()", got)
        self.assertFalse(_lib.forked())


@unittest.skipIf(torch is None and os.environ.get("CI") != "true", "torch is not installed")
class TestTorch(unittest.TestCase):
    def setUp(self):
        if torch is None:
            self.fail("torch is not installed (CI=true: install python3-torch)")
        import multirail.torch as mt

        self.mt = mt

    def test_registered(self):
        self.assertIn("MULTIRAIL", dist.Backend._plugins)
        self.assertTrue(dist.Backend._plugins["MULTIRAIL"].extended_api)
        import multirail.torch  # noqa: F401 (a second import registers nothing twice)

    def test_reduce_ops(self):
        R = dist.ReduceOp
        want = {R.SUM: 0, R.PRODUCT: 1, R.MIN: 2, R.MAX: 3, R.AVG: 4, R.BAND: 5, R.BOR: 6, R.BXOR: 7}
        for op, code in want.items():
            self.assertEqual(self.mt.reduce_op(op), code)
            o = dist.AllreduceOptions()
            o.reduceOp = op
            self.assertEqual(self.mt.reduce_op(o.reduceOp), code)
        with self.assertRaises(multirail.InvalidError):
            self.mt.reduce_op(R.PREMUL_SUM)

    def test_dense(self):
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        d = self.mt._Dense(t, "x")
        self.assertFalse(d.copied)
        self.assertEqual((d.ptr, d.count, d.dt, d.nbytes), (t.data_ptr(), 12, 7, 48))
        nc = t.t()  # not contiguous
        d = self.mt._Dense(nc, "x")
        self.assertTrue(d.copied)
        d.buf.add_(100)
        d.back()
        self.assertTrue(torch.equal(nc, t.t()))
        self.assertEqual(float(t[0, 0]), 100.0)
        c = torch.zeros(4, dtype=torch.complex64)
        d = self.mt._Dense(c, "x", 0)
        self.assertEqual((d.dt, d.count), (7, 8))
        with self.assertRaises(multirail.InvalidError):
            self.mt._Dense(c, "x", 3)  # max of complex
        with self.assertRaises(multirail.InvalidError):
            self.mt._Dense(torch.zeros(2, dtype=torch.int16), "x")
        e = torch.empty(0)
        self.assertNotEqual(self.mt._Dense(e, "x").ptr, 0)
        for dt, code in self.mt.DTYPES.items():
            self.assertEqual(self.mt._Dense(torch.zeros(2, dtype=dt), "x").dt, code)

    def test_state_args(self):
        with self.assertRaises(ValueError):
            self.mt.LossTolerantState(exact_steps=0)
        with self.assertRaises(ValueError):
            self.mt.LossTolerantState(smoothing=0)
        s = self.mt.LossTolerantState()
        self.assertIsNone(s.report_loss.__self__._ema)


if __name__ == "__main__":
    unittest.main()
