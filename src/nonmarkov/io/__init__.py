"""Files: atomic writes, and the results of a computation (:class:`Dynamics`)."""
