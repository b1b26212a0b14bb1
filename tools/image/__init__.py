"""`make image-test` (`python -m tools.image`): deploy/Dockerfile really built and run, on this
machine, with no container registry.

`programs` finds podman, runc, mmdebstrap and nsenter (installing them as root), `base` makes the
base image with mmdebstrap (cached in build/image/), `build` builds the image with podman,
`container` runs it as the Deployment does, `probe` talks HTTPS to it inside its network
namespace, `fixtures` makes what it mounts, and `checks` are the PASS/FAIL lines.
"""
