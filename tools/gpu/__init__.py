"""Scripts that run only on a GPU machine, each once per provenance file it makes (python3 -m tools.gpu.<name>)."""
