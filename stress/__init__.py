"""``syncverify stress``: run the fused kernels with a protocol many times, with seeded delays,
validate every tile on the device and classify what went wrong (``syncverify.stress.campaign.run_campaign``,
``syncverify.cli.stress.stress_command``). See docs/stress.md.
"""
