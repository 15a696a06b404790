# cmake -DIN=file.ptx -DOUT=file.c -DNAME=symbol -P embed_ptx.cmake
# Writes the PTX text as one C string (a hidden symbol of libgaia.so).
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n\"" text "${text}")
file(WRITE "${OUT}" "/* Generated from ${IN} at build time: do not edit. */\n"
  "__attribute__((visibility(\"hidden\"))) const char ${NAME}[] =\n\"${text}\";\n")
