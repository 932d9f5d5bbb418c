"""The gates: one guarded place per kind of boundary, below every other layer but errors, paths and spelling.

Everything that crosses into SegLens from outside passes through exactly one of these modules, and a house test
(tests/house/test_gates.py) fails when the raw call a gate wraps appears anywhere else:

- `names`: a name from outside (a UID, a station id, a server's file name, a class name) → one safe path
  component; `join_under` joins components under a root and proves the result stays inside it.
- `untrusted`: reading a file someone else wrote — regular files only (FIFOs, devices and sockets refused without
  blocking), no symlink out of a named root, size checked against the caller's limit before a byte is read.
- `shared`: writing SegLens's own files where others can also write (journals, logs, buffers, outputs, caches,
  locks) — never through a link planted under the name, atomic replace, private modes for patient data.
- `yaml_load`: the one YAML loader — size cap, no anchors or aliases, depth cap, duplicate keys refused.
- `net`: the one way to talk to a server over HTTP — a deadline per request, an answer-size cap, no redirect,
  credentials never in clear text to another host; `Deadline` bounds the other protocols (DIMSE, gRPC) too.
  Its requests session (DICOMweb's) lives in `net_session`, made by `net_session.guarded_session`.
- `answers`: a model's answer checked for dtype, shape and finiteness against what was declared, before use.

docs/SECURITY.md says what each gate guarantees and what it leaves to the operator.
"""
