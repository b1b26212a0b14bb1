"""The lwgpu test suite."""
