# cmake -DENVDOC=<gaia-envdoc> -DTEMPLATE=<page>.in -DOUTPUT=<page>
#       -DGAIA_VERSION=<version> -DGAIA_SONAME=<soname>
#       -DGAIA_LIBDIR_FROM_BINDIR=<path> -P man/generate.cmake
#
# A man page from its template: @GAIA_MAN_VARIABLES@ becomes the knobs as
# libgaia(7) lists them (gaia-envdoc --man), @GAIA_MAN_OPTIONS@ gaiarun's
# option of each knob (gaia-envdoc --man-options); @GAIA_VERSION@,
# @GAIA_SONAME@ and @GAIA_LIBDIR_FROM_BINDIR@ their values.
foreach(var ENVDOC TEMPLATE OUTPUT GAIA_VERSION GAIA_SONAME GAIA_LIBDIR_FROM_BINDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "man/generate.cmake: -D${var}= missing")
  endif()
endforeach()
foreach(mode variables options)
  if(mode STREQUAL "variables")
    set(arg --man)
  else()
    set(arg --man-options)
  endif()
  execute_process(COMMAND ${ENVDOC} ${arg}
    OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ENVDOC} ${arg} failed: ${rc}")
  endif()
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(TOUPPER ${mode} MODE)
  set(GAIA_MAN_${MODE} "${text}")
endforeach()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
# configure_file leaves an unchanged page as it was: touch it, or the build
# would make it again every time, being older than gaia-envdoc.
file(TOUCH ${OUTPUT})
