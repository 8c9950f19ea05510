"""One training job: the settings it is judged with, its values with the release's defaults, hardware,
environment and data (the files of a run and the loader that makes a job of one: `cfgopt.project`)."""
