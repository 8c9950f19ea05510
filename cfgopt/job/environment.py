"""The job's environment is `cfgopt.environment.stated`. This name stays only for the speed planner's imports while
cfgopt/plan/ is being split in another branch; they move to `cfgopt.environment.stated` next, and this module goes."""

from cfgopt.environment.stated import fa2_refusal, stops_at_start, torch_finds_no_gpu, transformers_at_least

__all__ = ["fa2_refusal", "stops_at_start", "torch_finds_no_gpu", "transformers_at_least"]
