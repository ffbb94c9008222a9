"""The maintained studies: each script's docstring names its question, its command, the results file
under docs/results/ it writes and how long it takes."""
