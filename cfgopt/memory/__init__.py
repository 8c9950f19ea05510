"""The memory model: peak memory per GPU from a job's plain values (it knows no job; the job asks it,
`Job.estimate`)."""
