"""The release gate: the rubric a version is held to and each of its checks."""
