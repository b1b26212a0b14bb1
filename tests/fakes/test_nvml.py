"""The NVML double answers as pynvml over the real libnvidia-ml does.

Errors are pynvml's own classes (`NVMLError.__new__` maps a code to its `NVMLError_*` subclass,
`_extractNVMLErrorsAsClasses`). NVML's rules, from nvml.h: nvmlInit_v2 / nvmlShutdown keep a
reference count; "NVML_ERROR_UNINITIALIZED if the library has not been successfully
initialized"; "no error is reported if nvmlShutdown() is called more times than nvmlInit()"
(before the library is loaded at all, pynvml's `_nvmlGetFunctionPointer` raises Uninitialized);
nvmlDeviceGetHandleByIndex_v2: "NVML_ERROR_INVALID_ARGUMENT if index is invalid". The structs
are pynvml's (`nvmlDeviceGetMemoryInfo(handle, version=None)`). Where no driver is installed,
the real pynvml is run too and must fail as the double does.
"""

import ctypes

import pynvml
import pytest

from tests.fakes.nvml import FakeNVML

GPUS = [("GRID P4-2Q", 2048 * 2**20), ("Tesla T4", 15360 * 2**20)]
CODES = [
    (pynvml.NVML_ERROR_UNINITIALIZED, "NVMLError_Uninitialized"),
    (pynvml.NVML_ERROR_INVALID_ARGUMENT, "NVMLError_InvalidArgument"),
    (pynvml.NVML_ERROR_NOT_SUPPORTED, "NVMLError_NotSupported"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVMLError_DriverNotLoaded"),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVMLError_LibraryNotFound"),
    (pynvml.NVML_ERROR_GPU_IS_LOST, "NVMLError_GpuIsLost"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVMLError_LibRmVersionMismatch"),
    (pynvml.NVML_ERROR_UNKNOWN, "NVMLError_Unknown"),
]


@pytest.mark.parametrize(("code", "class_name"), CODES)
@pytest.mark.parametrize("call", ["nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetMemoryInfo"])
def test_failures_raise_pynvmls_own_subclass(monkeypatch, code, class_name, call):
    nvml = FakeNVML(GPUS, {call: code}).install(monkeypatch)
    if call != "nvmlInit":
        pynvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError) as raised:
        getattr(pynvml, call)(*([GPUS[0]] if call == "nvmlDeviceGetMemoryInfo" else []))
    assert type(raised.value) is pynvml.nvmlExceptionClass(code)
    assert type(raised.value).__name__ == class_name
    assert raised.value.value == code
    assert str(raised.value) == str(pynvml.NVMLError(code))  # NVML's own wording
    assert nvml.calls[-1] == call


def count():
    return pynvml.nvmlDeviceGetCount()


def handle(index):
    """A call of nvmlDeviceGetHandleByIndex(index)."""
    return lambda: pynvml.nvmlDeviceGetHandleByIndex(index)


# The calls look pynvml's functions up when made: after the double is installed.
def init():
    pynvml.nvmlInit()


def shutdown():
    pynvml.nvmlShutdown()


INVALID, UNINITIALIZED = pynvml.NVMLError_InvalidArgument, pynvml.NVMLError_Uninitialized


# (calls in order, the last one's answer: a value or the NVMLError subclass it raises, what)
SEQUENCES = [
    ([count], UNINITIALIZED, "count before init"),
    ([shutdown], UNINITIALIZED, "shutdown before init"),
    ([handle(0)], UNINITIALIZED, "handle before init"),
    ([init, count], 2, "count"),
    ([init, shutdown, count], UNINITIALIZED, "count after shutdown"),
    ([init, init, shutdown, count], 2, "reference-counted init"),
    ([init, shutdown, shutdown], None, "one shutdown too many: no error"),
    ([init, shutdown, shutdown, count], UNINITIALIZED, "still shut down"),
    ([init, handle(1)], GPUS[1], "handle"),
    ([init, handle(2)], INVALID, "index past the last GPU"),
    ([init, handle(-1)], INVALID, "index -1, 4294967295 as a c_uint"),
    ([init, lambda: pynvml.nvmlDeviceGetName(GPUS[0])], "GRID P4-2Q", "name"),
]


@pytest.mark.parametrize(
    ("calls", "answer"), [case[:2] for case in SEQUENCES], ids=[case[2] for case in SEQUENCES]
)
def test_nvml_state_rules(monkeypatch, calls, answer):
    FakeNVML(GPUS).install(monkeypatch)
    *before, last = calls
    for call in before:
        call()
    if isinstance(answer, type):
        with pytest.raises(answer):
            last()
    else:
        assert last() == answer


@pytest.mark.parametrize(
    ("version", "struct"),
    [(None, pynvml.c_nvmlMemory_t), (pynvml.nvmlMemory_v2, pynvml.c_nvmlMemory_v2_t)],
)
def test_memory_info_is_pynvmls_struct(monkeypatch, version, struct):
    FakeNVML(GPUS).install(monkeypatch)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    info = pynvml.nvmlDeviceGetMemoryInfo(handle, **({"version": version} if version else {}))
    assert type(info) is struct
    assert info.total == GPUS[0][1] and info.used + info.free == info.total


def driver_installed() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


# Each call with the real pynvml on a machine without libnvidia-ml, and the double's setting
# that must fail the same way ({}: uninitialized, as the double starts).
WITHOUT_DRIVER = [
    ("nvmlInit", (), {"nvmlInit": pynvml.NVML_ERROR_LIBRARY_NOT_FOUND}),
    ("nvmlDeviceGetCount", (), {}),
    ("nvmlShutdown", (), {}),
    ("nvmlDeviceGetHandleByIndex", (0,), {}),
    ("nvmlDeviceGetName", (None,), {}),
    ("nvmlDeviceGetMemoryInfo", (None,), {}),
]


@pytest.mark.skipif(driver_installed(), reason="libnvidia-ml.so.1 is installed here")
@pytest.mark.parametrize(("call", "args", "fail"), WITHOUT_DRIVER)
def test_the_real_pynvml_without_a_driver_fails_as_the_double(monkeypatch, call, args, fail):
    with pytest.raises(pynvml.NVMLError) as real:
        getattr(pynvml, call)(*args)
    FakeNVML(GPUS, fail).install(monkeypatch)
    with pytest.raises(pynvml.NVMLError) as fake:
        getattr(pynvml, call)(*(GPUS[0] if a is None else a for a in args))
    assert type(fake.value) is type(real.value)
    assert str(fake.value) == str(real.value)
