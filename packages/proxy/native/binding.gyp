{
  "targets": [
    {
      "target_name": "sockopt",
      "sources": ["sockopt.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
