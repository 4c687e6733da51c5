"""The local Tablestore emulator: table API, stream log and Tunnel Service over the real wire protocol."""
