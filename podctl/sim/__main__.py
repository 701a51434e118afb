from podctl.sim.cli import main

main()
