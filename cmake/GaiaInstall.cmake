# The installed layout: the library's soname, and where gaiarun looks for
# it relative to itself.
#
#   <libdir>/libgaia.so.0.1.0        the library; libgaia.so.0 (its soname)
#                                    and libgaia.so (for -lgaia) link to it
#   <bindir>/gaiarun
#
# Directories are GNUInstallDirs' (lib, bin under the prefix, /usr/local by
# default). One version, project(VERSION): the library's file name and
# soname, and gaiarun --version. gaiarun finds the library relative to
# itself, so an installed tree works wherever it is.
include(GNUInstallDirs)

set_target_properties(gaia PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR})
set(GAIA_SONAME libgaia.so.${PROJECT_VERSION_MAJOR})

# gaiarun looks for <its dir>/<this>/libgaia.so.0 first.
foreach(dir BINDIR LIBDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(_gaia_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(_gaia_${dir} "/prefix/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
file(RELATIVE_PATH GAIA_LIBDIR_FROM_BINDIR "${_gaia_BINDIR}" "${_gaia_LIBDIR}")
if(GAIA_LIBDIR_FROM_BINDIR STREQUAL "")
  set(GAIA_LIBDIR_FROM_BINDIR .)
endif()
target_compile_definitions(gaiarun PRIVATE
  GAIA_VERSION="${PROJECT_VERSION}"
  GAIA_SONAME="${GAIA_SONAME}"
  GAIA_LIBDIR_FROM_BINDIR="${GAIA_LIBDIR_FROM_BINDIR}")

# test_gaiarun checks --version and the soname gaiarun looks for.
if(TARGET test_gaiarun)
  target_compile_definitions(test_gaiarun PRIVATE
    GAIA_VERSION="${PROJECT_VERSION}" GAIA_SONAME="${GAIA_SONAME}")
endif()
