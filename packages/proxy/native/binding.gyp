{
  "targets": [
    {
      "target_name": "sockopt",
      "sources": ["sockopt.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "splice",
      "sources": ["splice.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-pthread"],
      "ldflags": ["-pthread", "-Wl,-z,nodelete"]
    },
    {
      "target_name": "netns",
      "sources": ["netns.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
