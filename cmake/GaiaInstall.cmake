# What an install puts where (`make install`, `cmake --install`), and the
# installed files the build makes: the man pages and gaia.pc.
#
#   <libdir>/libgaia.so.0.1.0        the library; libgaia.so.0 (its soname)
#                                    and libgaia.so (for -lgaia) link to it
#   <libdir>/libgaia-simgpu.so       the shim's kernels for the simulated GPU
#                                    (built with the CUDA headers; loaded by
#                                    libgaia.so from its own directory)
#   <bindir>/gaiarun, gaia-envdoc
#   <includedir>/gaia.h
#   <libdir>/pkgconfig/gaia.pc
#   <mandir>/man1/gaiarun.1, <mandir>/man7/libgaia.7
#
# Directories are GNUInstallDirs' (lib, bin, include, share/man under the
# prefix, /usr/local by default). One version, project(VERSION): the
# library's file name and soname, gaia.pc, the man pages and the tools'
# --version. Nothing depends on the prefix chosen when configuring: gaiarun
# finds the library relative to itself, and gaia.pc is written at install
# time, so `cmake --install --prefix` anywhere gives a working tree.
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

# The man pages: prose from man/*.in, the knob lists from gaia-envdoc, which
# reads include/gaia_env.h, so that a knob cannot be missing from them.
set(GAIA_MAN_PAGES gaiarun.1 libgaia.7)
set(GAIA_MAN_OUTPUTS)
foreach(page ${GAIA_MAN_PAGES})
  set(out ${CMAKE_BINARY_DIR}/man/${page})
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DENVDOC=$<TARGET_FILE:gaia-envdoc>
            -DTEMPLATE=${PROJECT_SOURCE_DIR}/man/${page}.in -DOUTPUT=${out}
            -DGAIA_VERSION=${PROJECT_VERSION} -DGAIA_SONAME=${GAIA_SONAME}
            -DGAIA_LIBDIR_FROM_BINDIR=${GAIA_LIBDIR_FROM_BINDIR}
            -P ${PROJECT_SOURCE_DIR}/man/generate.cmake
    DEPENDS gaia-envdoc ${PROJECT_SOURCE_DIR}/man/${page}.in
            ${PROJECT_SOURCE_DIR}/man/generate.cmake
    COMMENT "Generating man page ${page}")
  list(APPEND GAIA_MAN_OUTPUTS ${out})
endforeach()
add_custom_target(gaia_man ALL DEPENDS ${GAIA_MAN_OUTPUTS})

install(TARGETS gaia LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET gaia_simgpu)
  install(TARGETS gaia_simgpu LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(TARGETS gaiarun gaia-envdoc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/gaia.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/man/gaiarun.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_BINARY_DIR}/man/libgaia.7 DESTINATION ${CMAKE_INSTALL_MANDIR}/man7)

# gaia.pc names the prefix installed into, which `cmake --install --prefix`
# may change after configuring: it is configured when installing, from
# cmake/gaia.pc.in, with the prefix of that install (DESTDIR is not part of
# it: PKG_CONFIG_SYSROOT_DIR adds that back for a staged tree).
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(GAIA_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(GAIA_PC_${dir} "\\\${prefix}/${CMAKE_INSTALL_${dir}}") # \${prefix} in the code below
  endif()
endforeach()
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(GAIA_PC_LIBDIR \"${GAIA_PC_LIBDIR}\")
  set(GAIA_PC_INCLUDEDIR \"${GAIA_PC_INCLUDEDIR}\")
  set(GAIA_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/gaia.pc.in\"
                 \"${CMAKE_BINARY_DIR}/pkgconfig/gaia.pc\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
       TYPE FILE FILES \"${CMAKE_BINARY_DIR}/pkgconfig/gaia.pc\")
")

# test_gaiarun checks --version and the soname gaiarun looks for.
if(TARGET test_gaiarun)
  target_compile_definitions(test_gaiarun PRIVATE
    GAIA_VERSION="${PROJECT_VERSION}" GAIA_SONAME="${GAIA_SONAME}")
endif()
