from feedfabric.cli import main

main()
