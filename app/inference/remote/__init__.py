"""A model served elsewhere over the Open Inference Protocol (KServe v2 / Triton): the remote session, its wires,
errors, graph, name and sidecar; and the one opener of a session on either backend (opener.py), which sees both
from here."""
