"""Under ``torchrun`` (``RANK``/``WORLD_SIZE`` set): ``python -m syncverify.stress.launch --options JSON``
runs one rank of a stress campaign in the current process (:func:`syncverify.stress.campaign.campaign_worker`);
rank 0 prints the result as JSON. Spawned real-rank runs go through
:func:`syncverify.stress.campaign.run_processes` instead."""

from __future__ import annotations

import argparse
import json
import os
import sys

from syncverify.stress.campaign import campaign_options, campaign_worker, load


def main(argv: list[str] | None = None) -> int:
    """``python -m syncverify.stress.launch --options JSON`` under torchrun: one rank in this process."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", required=True, help="campaign options as a JSON object")
    args = parser.parse_args(argv)
    options = json.loads(args.options)
    protocol = load(options.pop("protocol"))
    options["protocol"] = protocol.name
    o = campaign_options(**options)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    campaign_worker(rank, world, None, None, [(o.to_dict(), protocol)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
