"""HTTP endpoint of the broker (``http.listeners``)."""
