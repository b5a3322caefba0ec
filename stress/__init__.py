"""``syncverify stress``: run the fused kernels with a protocol many times, with seeded delays,
validate every tile on the device and classify what went wrong (``stress.campaign.run_campaign``,
``stress.cli.stress_command``). See docs/stress.md.
"""
