from cluster_manager.cli import main

main()
