"""A test double of NVML at the pynvml function boundary, for machines without a GPU.

`FakeNVML(gpus).install(monkeypatch)` replaces the pynvml functions the labeller calls
(`nvmlInit`, `nvmlShutdown`, `nvmlDeviceGetCount`, `nvmlDeviceGetHandleByIndex`,
`nvmlDeviceGetMemoryInfo`, `nvmlDeviceGetName`) with answers about the given GPUs, each a
(name, total bytes) pair. A call named in `fail` raises pynvml's real `NVMLError` for that code
(pynvml maps it to the real subclass), and like the real library every device call before
`nvmlInit` raises NVMLError_Uninitialized. `calls` records the functions called, in order.
"""

import pynvml


class FakeNVML:
    """NVML at the pynvml function boundary: GPUs as (name, total bytes), failing calls by name.

    Like the real library, device calls before nvmlInit raise NVMLError_Uninitialized.
    """

    def __init__(self, gpus, fail=None):
        self.gpus, self.fail, self.calls, self.ready = gpus, fail or {}, [], False

    def install(self, monkeypatch):
        """Replace the pynvml functions the labeller calls."""
        impls = {
            "nvmlInit": lambda: setattr(self, "ready", True),
            "nvmlShutdown": lambda: setattr(self, "ready", False),
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": lambda index: self.gpus[index],
            "nvmlDeviceGetMemoryInfo": lambda gpu: pynvml.c_nvmlMemory_t(
                total=gpu[1], free=gpu[1], used=0
            ),
            "nvmlDeviceGetName": lambda gpu: gpu[0],
        }
        for name, impl in impls.items():
            monkeypatch.setattr(pynvml, name, self._guarded(name, impl))
        return self

    def _guarded(self, name, impl):
        def call(*args):
            self.calls.append(name)
            if name in self.fail:
                raise pynvml.NVMLError(self.fail[name])  # maps to the real subclass
            if name != "nvmlInit" and not self.ready:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
            return impl(*args)

        return call
