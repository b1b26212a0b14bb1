"""The real webhook on a loopback port, for the tests and the tools that drive it: `server`
launches `python -m webhook serve` with real certificates and stops it; `https_client` speaks
HTTPS to it as the apiserver does (a caBundle, the Service's name as SNI, TCP_NODELAY).
"""
