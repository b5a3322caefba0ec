from syncverify.cli import main

main()
