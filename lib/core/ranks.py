"""The processes of one job: which one this is, how many there are, waiting for the others.

``torchrun --nproc_per_node N`` and ``accelerate launch`` start N copies of a command and tell each
its place through the environment (``RANK``, ``WORLD_SIZE``); a command started alone is rank 0 of 1.
Stages that split their work (stage 06 asks each rank a share of the questions) read it here, and
the main rank alone writes what the stage publishes. Waiting (:meth:`Ranks.barrier`) goes through
accelerate's process group (gloo on CPU, NCCL on GPUs), set up on first use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        """Wait until every rank of the job gets here (nothing to wait for alone)."""
        if self.world > 1:
            # deferred on purpose: accelerate brings torch; a single process never needs it here
            import torch.distributed as dist
            from accelerate import DistributedType, PartialState

            state = PartialState()  # the process group, set up on first use
            if state.distributed_type == DistributedType.NO:
                # on a CPU accelerate sets up torchrun's gloo group but waits in it only when told
                # cpu=True: its wait_for_everyone would return at once (only the group's setup waits)
                dist.barrier()
            else:
                state.wait_for_everyone()


def ranks() -> Ranks:
    """This process's place in its job, from the launcher's environment (alone: rank 0 of 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if not 0 <= rank < world:
        raise ValueError(
            f"RANK={rank} is outside WORLD_SIZE={world}: the launcher's environment is inconsistent"
        )
    return Ranks(rank, world)
