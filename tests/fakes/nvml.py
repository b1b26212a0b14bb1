"""A test double of NVML at the pynvml function boundary, for machines without a GPU.

`FakeNVML(gpus).install(monkeypatch)` replaces the pynvml functions the labeller calls
(`nvmlInit`, `nvmlShutdown`, `nvmlDeviceGetCount`, `nvmlDeviceGetHandleByIndex`,
`nvmlDeviceGetMemoryInfo`, `nvmlDeviceGetName`) with answers about the given GPUs, each a
(name, total bytes) pair; the name is given back as it is (str, as the pinned nvidia-ml-py
returns it, or bytes, as older releases did). A call named in `fail` raises pynvml's real
`NVMLError` for that code (pynvml maps it to the real subclass). Like the real library, NVML is
reference-counted (each nvmlInit needs its nvmlShutdown), every call but nvmlInit raises
NVMLError_Uninitialized while the count is 0 (except an extra nvmlShutdown once the library
is loaded: nvml.h, "no error is reported if nvmlShutdown() is called more times than
nvmlInit()"), and an index past the last GPU raises NVMLError_InvalidArgument. `calls`
records the functions called, in order. tests/fakes/test_nvml.py checks this against the real
pynvml.
"""

import pynvml


class FakeNVML:
    """NVML at the pynvml function boundary: GPUs as (name, total bytes), failing calls by name.

    Like the real library, calls before nvmlInit (or after the last nvmlShutdown) raise
    NVMLError_Uninitialized.
    """

    def __init__(self, gpus, fail=None):
        self.gpus, self.fail, self.calls, self.inits = gpus, fail or {}, [], 0
        self.loaded = False  # pynvml has loaded libnvidia-ml (its first nvmlInit did)

    @property
    def ready(self) -> bool:
        """Whether NVML is initialized: more nvmlInit than nvmlShutdown calls succeeded."""
        return self.inits > 0

    def install(self, monkeypatch):
        """Replace the pynvml functions the labeller calls."""
        impls = {
            "nvmlInit": self._init,
            "nvmlShutdown": self._shutdown,
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": self._handle,
            "nvmlDeviceGetMemoryInfo": self._memory,
            "nvmlDeviceGetName": lambda gpu: gpu[0],
        }
        for name, impl in impls.items():
            monkeypatch.setattr(pynvml, name, self._guarded(name, impl))
        return self

    def _init(self):
        self.inits += 1

    def _shutdown(self):
        self.inits = max(self.inits - 1, 0)

    def _handle(self, index):
        # nvmlDeviceGetHandleByIndex_v2 takes a c_uint: -1 is 4294967295, past the last GPU.
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.gpus[index]

    @staticmethod
    def _memory(gpu, version=None):
        # pynvml: no version, nvmlDeviceGetMemoryInfo's c_nvmlMemory_t; a version, _v2's struct
        if not version:
            return pynvml.c_nvmlMemory_t(total=gpu[1], free=gpu[1], used=0)
        return pynvml.c_nvmlMemory_v2_t(
            version=version, total=gpu[1], reserved=0, free=gpu[1], used=0
        )

    def _guarded(self, name, impl):
        def call(*args, **kwargs):
            self.calls.append(name)
            if name == "nvmlInit":  # _LoadNvmlLibrary runs before nvmlInit_v2 can fail
                self.loaded |= self.fail.get(name) != pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
            if name in self.fail:
                raise pynvml.NVMLError(self.fail[name])  # maps to the real subclass
            if name == "nvmlShutdown" and self.loaded:
                return impl()
            if name != "nvmlInit" and not self.ready:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
            return impl(*args, **kwargs)

        return call
