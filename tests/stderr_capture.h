// What a piece of code writes on stderr (fd 2), for tests of warnings:
// stderr is pointed at a temporary file while `body` runs.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

inline std::string stderr_of(const std::function<void()>& body) {
  std::fflush(stderr);
  FILE* capture = std::tmpfile();
  if (capture == nullptr) {
    std::perror("stderr_of: tmpfile");
    std::abort();
  }
  const int saved = dup(2);
  dup2(fileno(capture), 2);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  std::rewind(capture);
  for (int c; (c = std::fgetc(capture)) != EOF;) text += static_cast<char>(c);
  std::fclose(capture);
  return text;
}
