"""Pusher: versions that appear whole, on local disk, gs:// and a Vertex endpoint."""
