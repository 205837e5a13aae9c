"""jumbogate's test lab: what the tests, benchmarks and the emulated rack use
to run the real parts on one machine (veths, namespaces, BMv2, etcd, the
built programs and their harnesses, the port benchmarks' load generator).

Never installed with the controller. The tests find it through the
top-level conftest.py (pytest puts the repository's top on sys.path); other
programs put the top of the repository on PYTHONPATH.
"""
